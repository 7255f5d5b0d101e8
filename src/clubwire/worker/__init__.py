"""Webhook delivery: claim due deliveries, sign and send them, record, schedule."""
