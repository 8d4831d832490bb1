"""`python -m kernelsmith.cli`: the `kernelsmith` command, as `python -m kernelsmith` is."""

from kernelsmith.cli.app import main

if __name__ == "__main__":
    main()
