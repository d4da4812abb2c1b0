"""Allow ``python -m calib_cli``."""

from calib_cli.cli import main

if __name__ == "__main__":
    main()
