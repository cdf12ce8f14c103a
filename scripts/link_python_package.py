"""Make the package built in build/python importable by this interpreter.

Writes commfuse-dev.pth into site-packages pointing at the build tree, like an editable
install: rebuilding updates what `import commfuse` loads, with no copy to go stale.
"""
import pathlib
import site
import sys
import sysconfig


def main() -> int:
    target = pathlib.Path(sys.argv[1]).resolve()
    if not (target / "commfuse" / "__init__.py").exists():
        print(f"link_python_package: {target}/commfuse is not built", file=sys.stderr)
        return 1
    purelib = pathlib.Path(sysconfig.get_paths()["purelib"])
    try:
        purelib.mkdir(parents=True, exist_ok=True)
        pth = purelib / "commfuse-dev.pth"
        pth.write_text(f"{target}\n")
    except PermissionError:
        pth = pathlib.Path(site.getusersitepackages()) / "commfuse-dev.pth"
        pth.parent.mkdir(parents=True, exist_ok=True)
        pth.write_text(f"{target}\n")
    print(f"python: `import commfuse` -> {target} (via {pth})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
