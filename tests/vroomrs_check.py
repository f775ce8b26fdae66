"""Reads NDJSON profile chunks (argv[1]) with vroomrs, Sentry's own chunk library, the way
Sentry ingests them after Relay: parse, normalize, and report per chunk what Sentry sees.

Prints one JSON line per chunk: chunk_id, profiler_id, platform, duration_ms, start, end,
function count. Exits non-zero if vroomrs rejects any chunk.
"""
import json
import sys

import vroomrs

failures = 0
with open(sys.argv[1], encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
        if not line.strip():
            continue
        chunk = json.loads(line)
        # Fields Sentry adds on ingestion (vroomrs requires them).
        chunk.update(organization_id=1, project_id=1, received=0.0, retention_days=90)
        try:
            parsed = vroomrs.profile_chunk_from_json_str_and_version(json.dumps(chunk), "2")
            parsed.normalize()
            functions = parsed.extract_functions_metrics(min_depth=0, filter_system_frames=False)
            print(json.dumps({
                "line": n,
                "chunk_id": parsed.get_chunk_id(),
                "profiler_id": parsed.get_profiler_id(),
                "platform": parsed.get_platform(),
                "duration_ms": parsed.duration_ms(),
                "start": parsed.start_timestamp(),
                "end": parsed.end_timestamp(),
                "functions": len(functions),
            }))
        except Exception as e:  # vroomrs raises ValueError subclasses
            failures += 1
            print(json.dumps({"line": n, "error": str(e)}))
sys.exit(1 if failures else 0)
