"""`python -m kavka` is the `kavka` command."""

from kavka.cli.main import main

if __name__ == "__main__":
    main()
