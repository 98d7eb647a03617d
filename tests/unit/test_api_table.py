"""`protocol.api.SUPPORTED` finds the legacy-schema versions (below kio's) without importing
them, and every version it advertises that way loads."""

from __future__ import annotations

import json
import subprocess
import sys

from kavka.protocol import api
from kavka.protocol.legacy import LEGACY_PRODUCE_VERSIONS


def _legacy_versions() -> list[tuple[int, int]]:
    return [
        (key, v)
        for key, (lo, _hi) in api.SUPPORTED.items()
        for v in range(lo, min(api.kio_versions(key)))
        if not (key == api.ApiKey.PRODUCE and v in LEGACY_PRODUCE_VERSIONS)  # decoded as v3
    ]


def test_every_advertised_legacy_version_loads_both_schemas():
    found = _legacy_versions()
    assert len(found) >= 20, found  # Fetch v0-v3, ListOffsets v0, OffsetCommit v0, ... (Kafka 3.9's)
    for key, v in found:
        for schema in (api.request_schema(key, v), api.response_schema(key, v)):
            assert schema.__module__.startswith("kavka.protocol.legacy_schema.") or (
                (key, v, "response") in api.WIDENED
            ), (key, v, schema)
            assert schema.__flexible__ in (False, True)


def test_building_the_table_imports_no_legacy_schema():
    code = (
        "import json, sys; from kavka.protocol import api; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('kavka.protocol.legacy_schema.'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
