"""Email: failure emails to a club's admins (``notifications``), queued in the outbox
(``outbox``) that a worker sends."""
