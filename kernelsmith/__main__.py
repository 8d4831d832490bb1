"""`python -m kernelsmith`: the `kernelsmith` command, for environments without its script."""

from kernelsmith.cli import main

if __name__ == "__main__":
    main()
