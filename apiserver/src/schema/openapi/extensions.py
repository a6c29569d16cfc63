"""Writes extensions.txt from a Kubernetes release's swagger.json (argv[1]).

`make openapi-extensions` runs it on the release tests/real-cluster pins.
"""

import json
import re
import sys

KEYS = [
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-patch-strategy",
    "x-kubernetes-patch-merge-key",
]

HEADER = """\
# The x-kubernetes- extensions of the built-in kinds' fields (and, on `-`
# lines, of the definitions themselves) that k8s-openapi's schemas lack: how
# lists merge (patch strategy, merge key, list type and keys) and maps.
# kubectl computes a client-side apply's patch from these (a list without
# its merge key is replaced whole), and server-side apply tools read them.
# One per line: definition, field (or -), extension, its JSON value.
# Generated from Kubernetes {version}'s api/openapi-spec/swagger.json (stable
# versions only) by `make openapi-extensions`; do not edit."""


def main(path):
    with open(path) as f:
        spec = json.load(f)
    # The module's directory names the release (k8s.io/kubernetes@v1.37.2).
    release = re.search(r"@(v[0-9.]+)", path)
    print(HEADER.format(version=release.group(1) if release else "(unknown)"))
    for name in sorted(spec["definitions"]):
        if re.search(r"\.v\d+(alpha|beta)\d+\.", name):
            continue
        schema = spec["definitions"][name]
        fields = [("-", schema)] + sorted((schema.get("properties") or {}).items())
        for field, sub in fields:
            for key in KEYS:
                if key in sub:
                    value = json.dumps(sub[key], separators=(",", ":"))
                    print(f"{name} {field} {key} {value}")


main(sys.argv[1])
