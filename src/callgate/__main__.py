"""``python -m callgate``: the same as the ``callgate`` command."""

from callgate.cli.app import main

if __name__ == "__main__":
    main()
