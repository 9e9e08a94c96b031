package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/magiconair/properties"
)

// setting is one value from a configuration source, addressed by flag name.
type setting struct {
	flag  string // leaf-server flag it sets
	value string
	key   string // where it came from, e.g. leaf.jdbc.url
}

// leafKeys are the keys of Leaf's leaf.properties (and Spring's server.port)
// that leaf-server understands.
var leafKeys = map[string]bool{
	"leaf.name": true, "leaf.segment.enable": true, "leaf.jdbc.url": true,
	"leaf.jdbc.username": true, "leaf.jdbc.password": true, "leaf.snowflake.enable": true,
	"leaf.snowflake.zk.address": true, "leaf.snowflake.port": true, "server.port": true,
}

// readLeafProperties reads a Leaf leaf.properties file and turns it into
// flag settings. A key it does not know is an error naming the nearest known
// key (a typo must not leave a setting at its default); settings
// that contradict each other (segment mode on without a JDBC URL, snowflake
// mode on without a ZooKeeper address) are errors, because Leaf would refuse
// them too and silently falling back to a local store would split the IDs.
func readLeafProperties(path string) ([]setting, []string, error) {
	p, err := properties.LoadFile(path, properties.UTF8)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	get := func(k string) string { v, _ := p.Get(k); return strings.TrimSpace(v) }
	var out []setting
	var warnings []string
	if err := unknownLeafKeys(path, p.Keys()); err != nil {
		return nil, nil, err
	}
	add := func(flag, key, value string) { out = append(out, setting{flag: flag, value: value, key: key}) }
	if v := get("leaf.name"); v != "" {
		add("leaf-name", "leaf.name", v)
	}
	if v := get("server.port"); v != "" {
		if _, err := strconv.ParseUint(v, 10, 16); err != nil {
			return nil, nil, fmt.Errorf("%s: server.port %q is not a port", path, v)
		}
		// Leaf listens on every interface; so does a server configured by Leaf's file.
		add("listen", "server.port", ":"+v)
	}
	var errs []error
	if v := get("leaf.segment.enable"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: leaf.segment.enable %q: want true or false", path, v)
		}
		add("segment", "leaf.segment.enable", strconv.FormatBool(on))
		if on && get("leaf.jdbc.url") == "" {
			errs = append(errs, fmt.Errorf("%s: leaf.segment.enable=true but leaf.jdbc.url is empty", path))
		}
	}
	if u := get("leaf.jdbc.url"); u != "" {
		d, warn, err := jdbcToDSN(u, get("leaf.jdbc.username"), get("leaf.jdbc.password"))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: leaf.jdbc.url: %w", path, err))
		} else {
			add("segment-dsn", "leaf.jdbc.url", d)
			for _, w := range warn {
				warnings = append(warnings, path+": leaf.jdbc.url: "+w)
			}
		}
	}
	if v := get("leaf.snowflake.enable"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: leaf.snowflake.enable %q: want true or false", path, v)
		}
		add("snowflake", "leaf.snowflake.enable", strconv.FormatBool(on))
		if on {
			if get("leaf.snowflake.zk.address") == "" {
				errs = append(errs, fmt.Errorf("%s: leaf.snowflake.enable=true but leaf.snowflake.zk.address is empty", path))
			}
			// Leaf's snowflake mode always takes its worker ID from ZooKeeper.
			add("worker-id-source", "leaf.snowflake.enable", "zookeeper")
		}
	}
	if v := get("leaf.snowflake.zk.address"); v != "" {
		add("zk", "leaf.snowflake.zk.address", v)
	}
	if v := get("leaf.snowflake.port"); v != "" {
		add("snowflake-port", "leaf.snowflake.port", v)
	}
	return out, warnings, errors.Join(errs...)
}

// jdbcOption applies one MySQL Connector/J URL option to a go-sql-driver
// config; ok is false for a value it does not understand.
type jdbcOption func(c *mysql.Config, v string) (ok bool)

// jdbcOptions are the Connector/J options that mean something in Go. Others
// are dropped with a warning.
var jdbcOptions = map[string]jdbcOption{
	"characterEncoding": func(c *mysql.Config, v string) bool {
		cs := strings.ToLower(strings.ReplaceAll(v, "-", ""))
		if cs == "utf8" {
			cs = "utf8mb4" // Java's UTF-8 covers all of Unicode; MySQL's utf8 does not
		}
		c.Params = map[string]string{"charset": cs}
		return true
	},
	"useSSL": func(c *mysql.Config, v string) bool {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return false
		}
		c.TLSConfig = strconv.FormatBool(on)
		return true
	},
	"connectTimeout": func(c *mysql.Config, v string) bool { return msField(&c.Timeout, v) },
	"socketTimeout":  func(c *mysql.Config, v string) bool { return msField(&c.ReadTimeout, v) },
	"serverTimezone": func(c *mysql.Config, v string) bool {
		loc, err := time.LoadLocation(v)
		if err != nil {
			return false
		}
		c.Loc = loc
		return true
	},
	// useUnicode only switches Connector/J to characterEncoding; Go always speaks Unicode.
	"useUnicode": func(*mysql.Config, string) bool { return true },
	// database/sql reconnects by itself.
	"autoReconnect": func(*mysql.Config, string) bool { return true },
	"allowMultiQueries": func(c *mysql.Config, v string) bool {
		on, err := strconv.ParseBool(v)
		c.MultiStatements = on
		return err == nil
	},
}

func msField(d *time.Duration, v string) bool {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		return false
	}
	*d = time.Duration(ms) * time.Millisecond
	return true
}

// jdbcToDSN translates a JDBC URL as found in Leaf's leaf.jdbc.url into a
// leaf-go DSN: jdbc:mysql://host:port/db?opts → mysql://user:pass@tcp(host:port)/db?opts
// (options translated where they mean something in Go, see jdbcOptions), and
// jdbc:postgresql://host:port/db → postgres://user:pass@host:port/db. The
// password never appears in an error.
func jdbcToDSN(jdbc, user, password string) (string, []string, error) {
	rest, ok := strings.CutPrefix(jdbc, "jdbc:")
	if !ok {
		return "", nil, errors.New("want a jdbc:mysql:// or jdbc:postgresql:// URL")
	}
	u, err := url.Parse(rest)
	if err != nil {
		return "", nil, fmt.Errorf("not a URL: %w", err)
	}
	if u.Host == "" || u.User != nil {
		return "", nil, errors.New("want jdbc:<db>://host[:port]/database with the user in leaf.jdbc.username")
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return "", nil, errors.New("the URL names no database")
	}
	var warnings []string
	switch u.Scheme {
	case "mysql", "mariadb":
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "3306")
		}
		c := mysql.NewConfig()
		c.User, c.Passwd, c.Net, c.Addr, c.DBName = user, password, "tcp", host, db
		keys := make([]string, 0, len(u.Query()))
		for k := range u.Query() {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := u.Query().Get(k)
			apply, known := jdbcOptions[k]
			switch {
			case !known:
				warnings = append(warnings, fmt.Sprintf("option %s=%s has no Go equivalent and is ignored", k, v))
			case !apply(c, v):
				warnings = append(warnings, fmt.Sprintf("option %s=%s not understood and ignored", k, v))
			}
		}
		d := "mysql://" + c.FormatDSN()
		return d, warnings, nil
	case "postgresql", "postgres":
		pu := url.URL{Scheme: "postgres", Host: u.Host, Path: "/" + db, RawQuery: u.RawQuery}
		if user != "" {
			if password != "" {
				pu.User = url.UserPassword(user, password)
			} else {
				pu.User = url.User(user)
			}
		}
		return pu.String(), nil, nil
	default:
		return "", nil, fmt.Errorf("database %q not supported: want mysql or postgresql", u.Scheme)
	}
}

// unknownLeafKeys refuses the keys of path that leaf-server does not know
// (leafKeys), each named with the nearest known key, e.g. leaf.jdbc.ur: did
// you mean leaf.jdbc.url?
func unknownLeafKeys(path string, keys []string) error {
	known := make([]string, 0, len(leafKeys))
	for k := range leafKeys {
		known = append(known, k)
	}
	sort.Strings(known)
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		if !leafKeys[k] {
			errs = append(errs, fmt.Errorf("%s: unknown key %q: did you mean %s? (known keys: %s)",
				path, k, nearest(k, known), strings.Join(known, ", ")))
		}
	}
	return errors.Join(errs...)
}
