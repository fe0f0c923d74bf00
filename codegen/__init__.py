"""The mcpbind generator: pin -> model -> overlay -> emit -> write (and diff, projection)."""
