"""Reading what a run left: `kcsim state`, `history`, `report` and `whatif`.

`state` and `history` show a lake's cluster state (at a version or time) and a
partition's changes; `report` draws one offline HTML page of plots from a lake or a
replay's tables (`report_data` is its data, no plotting); `whatif` replays the same
events under two or more settings side by side (`whatif_report` draws them).

May import: `controller`, `schemas`, `streaming.lake`. Never the job, the shadow, the
importers, the chaos producer or the local clusters.
"""
