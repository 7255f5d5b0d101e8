"""The delivery engine and what staff do with deliveries: publishing events (``events``),
leasing lanes and claiming jobs (``claims``), one attempt (``attempts``) through the outbound
client (``outbound``), recording outcomes (``records``), Send test (``pings``), Replay
(``replays``), and deliveries as people see them (``deliveries``)."""
