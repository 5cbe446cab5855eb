"""The schema on Citus (DESIGN §4.7): what goes where (`plan`), applying it (`apply`), and
`stello migrate`'s runs of it (`runs`)."""
