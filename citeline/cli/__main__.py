"""``python -m citeline.cli``: the same as the ``citeline`` command."""

from citeline.cli.main import main

if __name__ == "__main__":
    main()
