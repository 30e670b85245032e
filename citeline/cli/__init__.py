"""The ``citeline`` command: a thin wrapper over :class:`citeline.Index` (flags mirror parameter names)."""
