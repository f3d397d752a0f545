"""Writes the dist-info of the package as the project's build lays it out (<build>/python): METADATA and
entry_points.txt from pyproject.toml, so that PYTHONPATH=<build>/python finds the pytest11 entry point as an
installed wheel would. Usage: write_dist_info.py --pyproject P --version V --out DIR"""
import argparse
import os
import tomllib


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pyproject", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.pyproject, "rb") as f:
        project = tomllib.load(f)["project"]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "METADATA"), "w") as f:
        f.write(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {args.version}\n")
    with open(os.path.join(args.out, "entry_points.txt"), "w") as f:
        for group, entries in project.get("entry-points", {}).items():
            f.write(f"[{group}]\n")
            for name, target in entries.items():
                f.write(f"{name} = {target}\n")
            f.write("\n")


if __name__ == "__main__":
    main()
