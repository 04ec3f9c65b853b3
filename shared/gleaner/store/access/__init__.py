"""Tenancy and who may act: row-level security per tenant, bearer tokens, back-office sessions."""
