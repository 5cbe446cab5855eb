"""A service's server: its factory (`server`), the call chain (`interceptors`, `access_log`,
`space_calls`, `boundary`, `wire`), health, calls between services of one process (`inproc`), and
a service's command line and run (`entry`, `runner`) with N workers behind one port (`workers`,
`ports`)."""
