"""Configuration beside the settings: every variable the project reads (`env_names`), and the
TOML files an operator writes (`files`, `toml_places`), checked with their line in errors."""
