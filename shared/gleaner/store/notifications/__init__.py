"""Notifications: change events, subscriptions (webhooks and channels) and the deliveries of each."""
