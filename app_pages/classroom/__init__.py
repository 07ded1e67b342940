"""A live class on the page: the teacher's strip and key (teacher), a following student's bar, listener and answers
(student), what both read (state), their two browser components (js), and what the router and the shell call
(panel). The class itself is app_core/classroom."""
