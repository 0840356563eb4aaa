"""Test helper for the schedule cache: copies the one entry of a cache directory to a file with
the chosen schedule's measured time replaced (and the checksum recomputed), or prints an entry's
measured time and suspect note.

  cache_time.py CACHE_DIR SECONDS OUT.json [DEVICE]   copy with measured_s = SECONDS
                                                    (and key.device = DEVICE)
  cache_time.py --show FILE.json             print "measured <s> suspect <note or None>"
"""
import json
import os
import sys


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def entry_of(text: str) -> dict:
    return json.loads(text)["entry"]


if sys.argv[1] == "--show":
    e = entry_of(open(sys.argv[2]).read())
    print("measured", e["chosen"]["measured_s"], "suspect", e.get("suspect"))
    sys.exit(0)

cache, secs, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
files = [f for f in os.listdir(cache) if f.endswith(".json")]
assert len(files) == 1, files
e = entry_of(open(os.path.join(cache, files[0])).read())
e["chosen"]["measured_s"] = secs
if len(sys.argv) > 4:
    e["key"]["device"] = sys.argv[4]
text = json.dumps(e, separators=(",", ":"))
with open(out, "w") as f:
    f.write('{"format":1,"checksum":"fnv1a64:%016x","entry":%s}' % (fnv1a64(text.encode()), text))
