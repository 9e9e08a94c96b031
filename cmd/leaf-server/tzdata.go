package main

// Grouped tags (docs/contract.md §10) start their periods at midnight in an
// IANA time zone. The system's zoneinfo is used when present; the copy
// embedded by time/tzdata (about 450 kB) is the fallback, so that a minimal
// image without /usr/share/zoneinfo still knows Asia/Shanghai.
import _ "time/tzdata"
