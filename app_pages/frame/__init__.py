"""The frame around every page: the link and the state (shell), the shared controls and their callbacks, small
drawing helpers and shared figures (widgets), the interface's language (i18n), the session's model and its workspace
(session), the presenter keys, the model picker's default-model wait and download box, and a lesson step's panel."""
