// The dashboard page (dashboard_html.c, generated from dashboard.html by embed_dashboard.py).
#ifndef TACHYON_SERVER_DASHBOARD_HTML_H
#define TACHYON_SERVER_DASHBOARD_HTML_H

extern const char srv_dashboard_html[];
extern const unsigned long srv_dashboard_html_len;

#endif
