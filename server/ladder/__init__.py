"""Bot ladders (docs/ladder.md): entrants rated in pools by duplicate matches.

``events`` (the log), ``state`` (its fold), ``entrants``, ``pools``, ``matches`` (duplicate
matches played by the engine), ``ratings`` (OpenSkill Plackett-Luce), ``pairing``, ``runner``
(what plays a match), ``service`` (the ladder: schedule, record, resume), ``stats`` and
``commands`` (``ramino ladder``).
"""
