"""Text in and out of the process: strict JSON text, protobuf Timestamps, a file's name as a
message shows it. Each imports nothing heavy: the SDK and the command line import them."""
