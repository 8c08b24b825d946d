"""The ``simhash-redis`` command: a thin Typer layer over the library (installed as simhash_redis.cli).

Every command parses options, calls a library function and prints; what a command does can be done from
Python with the same library calls. Commands live one group per module, each added to the app by its
`register` (made by `common.registrar`); `app.COMMAND_MODULES` lists the modules. Options several
commands share are defined once, in `options`.
"""
