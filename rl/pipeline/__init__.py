"""The online cycle: snapshot the live store, build the task set, train (cold-start SFT or GRPO from
the champion), gate the candidate against the champion and promote it, as a chain of Celery tasks
(`celery_app`, `tasks`) over plain step functions (`steps`, `gate`), with the cycle's state in
Postgres (`state`, `progress`), its lock, recovery after a dead worker and the sweep (`runner`)."""
