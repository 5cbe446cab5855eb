"""Generate the Python gRPC stubs from protos/ into stello/*/v1/.

One command, deterministic output: `python scripts/gen_protos.py`. The proto
packages are `stello.<name>.v1`, so protoc's own import paths already land in
our package namespace and no import rewriting is needed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
PACKAGES = ("common", "storage", "tree", "agent")
INIT_TEXT = '"""Generated gRPC stubs (scripts/gen_protos.py); do not edit."""\n'


def generate(out_dir: Path = ROOT) -> None:
    """Run protoc over every proto file, writing stubs under out_dir."""
    files = sorted(str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTOS}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--pyi_out={out_dir}",
        *files,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for name in PACKAGES:
        folder = out_dir / "stello" / name / "v1"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text(INIT_TEXT)
        parent_init = folder.parent / "__init__.py"
        if not parent_init.exists():
            parent_init.write_text(INIT_TEXT)


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
