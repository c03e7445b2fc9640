"""`hearth keys`: the local server's named API keys (engine/server/api_keys.py).

    hearth keys create laptop     prints the new key once; only its hash is kept
    hearth keys list              names, first characters, when created
    hearth keys revoke laptop     refused from the next request on, by a running server too

While any named key exists, `hearth serve` and the window's server take requests only with a key.
"""

from __future__ import annotations

import argparse
import sys
import time

from engine.server.api_keys import KeyStore, KeyStoreError
from engine.untrusted_text import printable_line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="make a new key with a name; it is shown once")
    create.add_argument("name", help="what the key is for, e.g. laptop or zed")
    actions.add_parser("list", help="the keys: name, first characters, when created")
    revoke = actions.add_parser("revoke", help="stop a key from working")
    revoke.add_argument("name")


def run(args: argparse.Namespace) -> int:
    store = KeyStore()
    try:
        if args.action == "create":
            key = store.create(args.name)
            print(key)
            print(f"[Key {args.name!r} created. It is shown this once (only its hash is kept): "
                  "clients send it as 'Authorization: Bearer KEY'.]", file=sys.stderr)  # fmt: skip
        elif args.action == "revoke":
            store.revoke(args.name)
            print(f"Key {args.name!r} revoked.")
        else:
            keys = store.listed()
            if not keys:
                print("No named keys. Create one with `hearth keys create NAME`.")
            for key in keys:
                made = time.strftime("%Y-%m-%d %H:%M", time.localtime(key.created_at))
                print(f"{printable_line(key.name)}\t{key.shown}\tcreated {made}")
    except (KeyStoreError, OSError) as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0
