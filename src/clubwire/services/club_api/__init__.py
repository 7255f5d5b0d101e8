"""The club data API: who is calling and what it answers (``api_access``), its rate limits
(``rate_limits``), and the API keys clubs create and revoke (``keys``)."""
