"""Staff and the settings area: accounts (``users``), throttled sign-ins (``sign_ins``),
server-side sessions (``web_sessions``), one-time flashes (``flashes``) and confirmation pages that
act once (``confirmations``)."""
