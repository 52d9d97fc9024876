"""PC0: problems with the input itself, reported by the engine (parse errors, unreadable files)."""
