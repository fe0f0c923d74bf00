"""`make bench`: mcpbind against the official bindings and the untyped floor (see __main__)."""
