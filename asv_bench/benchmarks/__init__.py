"""tapejit's asv suite. The modules import each other as top-level modules (``from workloads
import ...``) so that tests and asv_bench/compare_peer.py can use them through a plain sys.path
entry, without asv; asv imports this folder as a package, so put the folder on sys.path here."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
