"""`trainscale runs delete`: runs removed from the store, with their epochs and step times,
after saying which (a mistaken run, a test, runs measured on a busy machine)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from trainscale.cli.common import add_json_argument
from trainscale.cli.lines import print_json
from trainscale.errors import ConfigError, StoreError
from trainscale.results.records import DamagedRecordError
from trainscale.results.store import still_running_refusal

if TYPE_CHECKING:
    from trainscale.results.records import DamagedRow, RunRecord
    from trainscale.results.store import RunStore

FILTERS = ("workload", "status", "tag", "limit")

EPILOG = """\
examples:
  trainscale runs delete 8608bb6a be4aa017        # these runs (ids or unique prefixes)
  trainscale runs delete --status failed --dry-run   # list what would go, delete nothing
  trainscale runs delete --tag bench:3f2a9c1e --yes  # a bench's runs, without asking
"""


def add_parser(actions: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    """Register `runs delete` under `runs`; `parents` give the run filters and --store."""
    parser = actions.add_parser(
        "delete",
        parents=parents,
        help="delete runs (by id, or by workload, status or tag) with their epochs and steps",
        description=(
            "Delete the runs named by id, or else those matching the filters, with their "
            "epochs and step times, in one transaction. The runs are listed first, and "
            "deleted once confirmed (--yes, or y at the prompt); a run still running is "
            "refused. A sweep keeps its plan: `trainscale sweep --resume` makes its deleted "
            "runs again."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="runs to delete")
    parser.add_argument("--dry-run", action="store_true", help="list the runs, delete nothing")
    parser.add_argument("--yes", action="store_true", help="delete without asking")
    add_json_argument(parser, help="print the runs deleted (or, with --dry-run, to delete)")
    parser.set_defaults(runs_handler=run)


def run(args: argparse.Namespace) -> int:
    """List the selected runs, confirm, delete; a mistake is one line (exit 2)."""
    from trainscale.reporting import listing as stored

    filters = {key: getattr(args, key) for key in FILTERS}
    if not args.run_ids and all(value is None for value in filters.values()):
        raise ConfigError(
            "name the runs to delete: run ids, or --workload, --status or --tag "
            "(`trainscale runs delete --help`)"
        )
    with stored.open_for_reading(args.store) as opened:
        chosen, damaged = _selected(opened, args.run_ids, filters)
        shown = sys.stderr if args.json else sys.stdout
        for record in chosen:
            print(
                f"  {record.short_id}  {stored.short_time(record.created_at)}  {record.workload}  "
                f"{record.status}" + (f"  tag {record.tag}" if record.tag else ""),
                file=shown,
            )
        for row in damaged:
            print(f"  {row.ident[:8]}  damaged stored JSON ({', '.join(row.columns)})", file=shown)
        ids = [record.run_id for record in chosen] + [row.ident for row in damaged]
        running = [record.run_id for record in chosen if record.status == "running"]
        if running:  # refused before asking, as the delete would, and a dry run says so too
            raise StoreError(still_running_refusal(running[0]))
        if not ids:
            print("no run matches: nothing to delete", file=shown)
        elif args.dry_run:
            print(f"{len(ids)} run(s) would be deleted from {opened.path} (--dry-run)", file=shown)
        else:
            _confirm(len(ids), str(opened.path), args.yes)
            deleted = opened.delete_runs(ids)
            print(f"deleted {deleted} run(s) from {opened.path}", file=shown)
    if args.json:
        print_json({"store": str(opened.path), "dry_run": args.dry_run, "runs": ids}, indent=2)
    return 0


def _selected(
    opened: RunStore, run_ids: list[str], filters: dict[str, Any]
) -> tuple[list[RunRecord], list[DamagedRow]]:
    """The runs to delete, and the damaged rows among them (which listings leave out, and
    which deleting is the way to be rid of)."""
    from trainscale.reporting import listing as stored

    if not run_ids:
        seen = len(opened.left_out)
        chosen = stored.select_runs(opened, [], **filters)
        if filters.get("limit") is not None:  # the newest N readable runs: no damaged row
            return chosen, []  # joins them (the listing read past every one it met)
        return chosen, [row for row in opened.left_out[seen:] if row.kind == "run"]
    chosen, damaged = [], []
    for run_id in run_ids:
        try:
            chosen.extend(stored.select_runs(opened, [run_id], **filters))
        except DamagedRecordError as error:
            damaged.append(error.damaged)
    unique_damaged = {row.ident: row for row in damaged}
    return list({r.run_id: r for r in chosen}.values()), list(unique_damaged.values())


def _confirm(count: int, store: str, yes: bool) -> None:
    """Return if deleting is confirmed: --yes, or y at the prompt of a terminal."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise ConfigError(
            f"{count} run(s) would be deleted from {store}; add --yes to delete them "
            "(--dry-run lists them)"
        )
    # On stderr, as input() would not: with --json, stdout is the document.
    print(f"delete {count} run(s) from {store}? [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()  # "" at the end of input (Ctrl-D): no
    if answer.strip().lower() not in ("y", "yes"):
        raise ConfigError("nothing deleted")
