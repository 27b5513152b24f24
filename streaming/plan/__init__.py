"""`kcsim plan`: previewing an operation on a cluster before doing it (CONTRACT §6).

`command` is the command (options, exit status), `sources` reads the state it starts from
(an event log, a lake, a live cluster read once), `render` and `report` write what it
found (a table, JSON, an HTML page). The planning itself is `controller.plan`, pure.
"""
