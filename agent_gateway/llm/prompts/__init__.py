"""The built-in texts the gateway sends a model, and the messages made of them.

- `texts`: the registry of keys, the presets (``en``, ``zh``);
- `templates`: ``{name}`` templates and their variables;
- `messages`: the configured texts (`Prompts`) and the helper calls' messages;
- `config`: the configured set, a preset and a prompts file's overrides, checked at start.
"""
