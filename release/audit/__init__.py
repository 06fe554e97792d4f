"""`release audit`: the checks `release verify` applies to a release's wheels and index,
against any PEP 503/691 index or list of wheel URLs, with no matrix and no credentials;
`run.audit` is the stage's one entry point.

Its modules:

- `report`: What one audit found: the summary by rule, each finding, what it could not check,
  and its `--json` document with that document's JSON Schema.
- `run`: One audit: every page and wheel read, one wheel at a time per worker, under its limits.
- `sources`: What an audit reads: index pages and wheel URLs, from arguments and `--urls FILE`.
"""
