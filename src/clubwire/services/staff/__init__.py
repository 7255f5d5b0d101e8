"""Staff and the settings area: accounts (``users``), throttled sign-ins (``sign_ins``),
server-side sessions (``web_sessions``) and one-time flashes (``flashes``)."""
