#!/usr/bin/env bash
# checkrefs.sh: every name a design document points at must exist in the tree.
#
#   bash docs/checkrefs.sh                      # docs/architecture.md, strict
#   bash docs/checkrefs.sh --loose FILE...      # e.g. RELIABILITY.md BENCHMARKS.md
#
# Strict mode reads every `code span` of docs/architecture.md (tables cell by
# cell, prose paragraph by paragraph, and the package diagram) in order. A
# path (`segment/get.go`, `store/{postgres,mysql}/lease.go`, `…/x.sql`,
# `faults/*_test.go`, `root.go` next to the file before it) must exist, and
# becomes the context of the names after it in the same cell or paragraph;
# `<x>` in a path stands for any name. A
# Go name (`Get`, `Tag.Get`, `segment.Code`, `Config.OnLoad`, `Default*`) must
# be declared in that context (a func, method, type, var, const, field or
# interface method), or, qualified by a package (`store.Store`), in that
# package; with no context yet, anywhere in the module. Test, benchmark and
# fuzz functions are looked up the same way among the _test.go files; a bare
# package name (`segment`, `faults` next to `faultproxy`) opens that package
# as the context. Database and metric
# names (`max_id`, `leaf_segment_*`) in the Go and SQL files; routes
# (`/api/v1/…`) in api/routes_test.go; `make x` in the Makefile; other code
# text (`BEGIN IMMEDIATE`) in the context file. The columns "file" and "what"
# of a table name data files and formats, not code, and are left out.
#
# Loose mode checks only paths (in code spans and in the text; from the
# root, internal/testing or the document's folder), test, benchmark and fuzz
# function names, and package-qualified names.
#
# It prints one line per name that does not resolve and exits 1 if there is
# any. Run it from anywhere inside the repository.
set -uo pipefail
cd "$(git rev-parse --show-toplevel)" || exit 2

fail=0
checked=0
unchecked=() # code text with nothing to check it against
bad() { # unit token why
	printf '%s: `%s`: %s\n' "$1" "$2" "$3"
	fail=$((fail + 1))
}

# Files of a context: a file, a glob, or a package directory (its .go files).
ctx_files() { # context...
	local c f
	for c in "$@"; do
		for f in $c; do
			if [[ -d $f ]]; then
				ls "$f"/*.go 2>/dev/null
			elif [[ -f $f ]]; then
				echo "$f"
			fi
		done
	done
}

# Expand {a,b} (paths only: a chi {key} has no comma) and …/ (the directory
# of the path before) into shell globs, one per line.
expand_path() { # token prevdir
	local t=$1 prev=$2
	t=$(sed 's/<[^>]*>/*/g' <<<"$t") # store/<dialect>: any
	if [[ $t == …/* ]]; then
		t="$prev/${t#…/}"
	fi
	if [[ $t =~ \{[^}]*,[^}]*\} ]]; then
		eval "printf '%s\n' $(printf '%s' "$t" | sed 's/[^{},/A-Za-z0-9_.*-]//g')"
	else
		printf '%s\n' "$t"
	fi
}

# decl NAME FILE...: NAME is declared at the top level of one of the files,
# or is a field, interface method or block entry (one tab in).
decl() {
	local n=$1
	shift
	[[ $# -gt 0 ]] || return 1
	grep -qE "^func (\([^)]*\) )?${n}[[(]|^(type|var|const) ${n}\b|^	${n}(\s+[^:[:space:]]|\(|,|$)|^	[A-Za-z_][A-Za-z0-9_]*(, [A-Za-z_][A-Za-z0-9_]*)*, ${n}( [^:=]|,|$)" "$@"
}

# member TYPE NAME FILE...: a method of TYPE, or a field or interface method
# inside TYPE's declaration.
member() {
	local t=$1 n=$2
	shift 2
	[[ $# -gt 0 ]] || return 1
	grep -qE "^func \([A-Za-z_]* ?\*?${t}(\[[^]]*\])?\) ${n}\(" "$@" && return 0
	awk -v t="$t" -v n="$n" '
		$0 ~ "^(type )?\t?" t " (struct|interface)" { in_t = 1; next }
		in_t && /^\t?}/ { in_t = 0 }
		in_t && $0 ~ "^\t+" n "([^A-Za-z0-9_]|$)" { found = 1 }
		END { exit !found }' "$@"
}

# A module package whose last element is $1 (segment, atomicfile, sqllease).
pkg_dir() {
	git ls-files '*.go' | grep -v '^internal/testing/' | xargs -n1 dirname | sort -u |
		awk -v p="$1" '{ n = split($0, e, "/"); if (e[n] == p || $0 == p) print }' | head -1
}

all_go() { git ls-files '*.go'; }

resolve_name() { # unit token context-files...
	local unit=$1 tok=$2
	shift 2
	local files=("$@")
	local head rest pdir pfiles
	if [[ $tok =~ ^(Test|Benchmark|Fuzz|Example)[A-Za-z0-9_]*$ ]]; then
		if [[ ${#files[@]} -gt 0 ]]; then
			grep -qE "^func ${tok}\(" "${files[@]}" || bad "$unit" "$tok" "no such test function in ${files[*]}"
		else
			git grep -qE "^func ${tok}\(" -- '*_test.go' || bad "$unit" "$tok" "no such test function"
		fi
		return
	fi
	if [[ $tok =~ ^[a-z0-9]+(_[a-z0-9]+)+_?\*?$ || $tok =~ ^[A-Z]+(_[A-Z]+)*_?\*?$ || $tok =~ ^[a-z.-]+\.(db|json|properties|highwater)$ ]]; then
		# a table, column or metric name, a data file's name or a constant
		# string (LOCK)
		git grep -qF "${tok%\*}" -- '*.go' '*.sql' || bad "$unit" "$tok" "not in any .go or .sql file"
		return
	fi
	if [[ $tok == *\* ]]; then # Default*: some name with that prefix
		local pre=${tok%\*}
		if [[ ${#files[@]} -gt 0 ]] && grep -qE "^	${pre}[A-Za-z0-9_]*\s+=|^(const|var) ${pre}" "${files[@]}"; then
			return
		fi
		bad "$unit" "$tok" "no name with that prefix in ${files[*]:-the module}"
		return
	fi
	if [[ ${#files[@]} -gt 0 ]]; then
		if [[ $tok == *.* ]]; then
			member "${tok%%.*}" "${tok#*.}" "${files[@]}" && return
		else
			decl "$tok" "${files[@]}" && return
			# a command or option name the code spells as a string
			[[ $tok =~ ^[a-z][A-Za-z]*$ ]] && grep -qE "\"${tok}[\" ]" "${files[@]}" && return
		fi
	fi
	# pkg.Name, pkg.Type.Member
	if [[ $tok == *.* ]]; then
		head=${tok%%.*}
		rest=${tok#*.}
		pdir=$(pkg_dir "$head")
		if [[ -n $pdir ]]; then
			mapfile -t pfiles < <(ctx_files "$pdir")
			if [[ $rest == *.* ]]; then
				member "${rest%%.*}" "${rest#*.}" "${pfiles[@]}" && return
			else
				decl "$rest" "${pfiles[@]}" && return
			fi
			bad "$unit" "$tok" "not declared in package $pdir"
			return
		fi
	fi
	if [[ ${#files[@]} -gt 0 ]]; then
		bad "$unit" "$tok" "not declared in ${files[*]}"
		return
	fi
	# no context: anywhere in the module
	mapfile -t pfiles < <(all_go)
	if [[ $tok == *.* ]]; then
		member "${tok%%.*}" "${tok#*.}" "${pfiles[@]}" && return
	else
		decl "$tok" "${pfiles[@]}" && return
	fi
	bad "$unit" "$tok" "not declared anywhere"
}

# routes: the chi patterns of api/routes_test.go's table.
routes=$(grep -oE '"/[^"]*"' api/routes_test.go | tr -d '"')

strict() { # file
	local file=$1 unit ctxs=() prevdir="." tok t f last_unit=""
	# One line per code span: unit TAB token. Units are table cells
	# (Lline:cN), paragraphs (Pline) and the diagram (Dline).
	while IFS=$'\t' read -r unit tok; do
		if [[ $unit != "$last_unit" ]]; then
			ctxs=()
			prevdir="."
			last_unit=$unit
		fi
		checked=$((checked + 1))
		if [[ $unit == D* ]]; then # a package in the diagram
			[[ -n $(ls "$tok"/*.go 2>/dev/null) ]] || bad "$unit" "$tok" "no Go package there"
			continue
		fi
		local pre=${tok%%<*}
		if [[ $tok =~ \<[A-Za-z][A-Za-z_-]*\> && $pre != */ ]]; then
			# Text with <placeholders> (a file the server writes at run
			# time, a line of it): the rest is spelt in the code.
			local part
			while read -r part; do
				[[ -z $part ]] && continue
				git grep -qF -- "$part" -- '*.go' || bad "$unit" "$tok" "\"$part\" not in any .go file"
			done < <(sed 's/<[^>]*>/\n/g; s#/#\n#g' <<<"$tok")
			continue
		fi
		case $tok in
		/*) # a route
			t=${tok%%…*}
			t=${t%\*}
			local ok=0 r e
			while read -r e; do
				while read -r r; do
					[[ $r == "$e"* ]] && ok=1
				done <<<"$routes"
			done < <(expand_path "$t" .)
			((ok)) || bad "$unit" "$tok" "no such route in api/routes_test.go"
			continue
			;;
		./*) # a path at run time (a default): the code names it
			git grep -qF -- "\"$tok\"" -- '*.go' || bad "$unit" "$tok" "no Go string names it"
			continue
			;;
		"bash "*) # a script of the repository
			[[ -f ${tok#bash } ]] || bad "$unit" "$tok" "no such script"
			continue
			;;
		"go "*) # a go command: left to the reader
			unchecked+=("$unit: $tok")
			continue
			;;
		"make "*)
			grep -qE "^${tok#make }:" Makefile || bad "$unit" "$tok" "no such Makefile target"
			continue
			;;
		esac
		if [[ $tok =~ ^[A-Za-z0-9_.*{},…/\<\>-]+$ && ($tok == */* || $tok =~ \.(go|md|sql|sh|yml|mod|pgo|html|js|css)$ || $tok == Makefile || $tok == Dockerfile) ]]; then
			# A path: it must exist, and the names after it are looked up
			# in it. A bare file name lies next to the path before it.
			local pats=() pat found
			while read -r pat; do
				if [[ $pat != */* && ${#ctxs[@]} -gt 0 ]] && compgen -G "$prevdir/$pat" >/dev/null; then
					pat="$prevdir/$pat"
				fi
				pat=${pat%/}
				found=0
				for f in $pat; do [[ -e $f ]] && found=1; done
				((found)) || bad "$unit" "$tok" "no such file or directory: $pat"
				pats+=("$pat")
			done < <(expand_path "$tok" "$prevdir")
			ctxs=("${pats[@]}")
			if [[ -d ${pats[0]} ]]; then prevdir=${pats[0]}; else prevdir=$(dirname "${pats[0]}"); fi
			continue
		fi
		if [[ $tok =~ ^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\*?$ ]]; then
			local files=() d=""
			[[ ${#ctxs[@]} -eq 0 ]] || mapfile -t files < <(ctx_files "${ctxs[@]}")
			# A bare package name (**`segment`** at the head of a paragraph,
			# the cells of the import table; next to the path before, or
			# from the root) opens a context, unless the context declares
			# the name.
			if [[ $tok != *.* && $tok != *\* ]] && ! { [[ ${#files[@]} -gt 0 ]] && decl "$tok" "${files[@]}"; }; then
				for d in "$prevdir/$tok" "$(dirname "$prevdir")/$tok" "$tok" ""; do
					[[ -n $d && -n $(ls "$d"/*.go 2>/dev/null) ]] && break
				done
			fi
			if [[ -n $d ]]; then
				d=${d#./}
				ctxs=("$d")
				prevdir=$d
				continue
			fi
			resolve_name "$unit" "$tok" "${files[@]}"
			continue
		fi
		# Other code text: each part between … must be in the context file.
		if [[ ${#ctxs[@]} -eq 0 ]]; then
			unchecked+=("$unit: $tok")
		else
			local files=() part
			mapfile -t files < <(ctx_files "${ctxs[@]}")
			while read -r part; do
				[[ -z $part ]] && continue
				grep -qF -- "$part" "${files[@]}" || bad "$unit" "$tok" "\"$part\" not in ${files[*]}"
			done < <(sed 's/ *… */\n/g' <<<"$tok")
		fi
	done < <(gawk '
		function emit(u, s,   t) {
			while (match(s, /`[^`]+`/)) {
				t = substr(s, RSTART + 1, RLENGTH - 2)
				gsub(/\\\|/, "|", t)
				print u "\t" t
				s = substr(s, RSTART + RLENGTH)
			}
		}
		/^```/ { fence = !fence; next }
		fence {
			n = split($0, col, /  +/)
			for (i = 3; i <= n; i++) { split(col[i], w, " "); if (w[1] != "") print "D" NR "\t" w[1] }
			next
		}
		/^\|/ {
			line = $0
			gsub(/\\\|/, "\001", line)
			n = split(line, cell, "|")
			if (!intable) { intable = 1; for (i = 2; i < n; i++) { h = cell[i]; gsub(/^ +| +$/, "", h); head[i] = h } ; next }
			if (line ~ /^\| *-/) next
			for (i = 2; i < n; i++) {
				if (head[i] == "file" || head[i] == "what") continue
				c = cell[i]; gsub("\001", "\\|", c)
				emit("L" NR ":c" i - 1, c)
			}
			next
		}
		{ intable = 0 }
		/^$/ || /^#/ || /^- / || /^[0-9]+\. / { para = NR }
		/^#/ { next }
		{ emit("P" para, $0) }
	' "$file")
}

loose() { # file
	local file=$1 tok f
	# Paths anywhere in the text (a word with a slash or a file suffix).
	while read -r tok; do
		checked=$((checked + 1))
		local found=0 pat
		while read -r pat; do
			for f in $pat internal/testing/$pat "$(dirname "$file")"/$pat; do
				[[ -e $f ]] && found=1
			done
		done < <(expand_path "$tok" .)
		# or a package of the standard library (`sync/atomic`)
		((found)) || go list "$tok" >/dev/null 2>&1 || bad "$file" "$tok" "no such file or directory"
	done < <(grep -oP '(?<![\w/.:-])((\.?[A-Za-z0-9_{},-]+/)+[A-Za-z0-9_{},*.-]+\.(go|md|sql|sh|yml|mod)\b|[A-Za-z0-9_-]+\.(go|md|sql|sh)\b)|`(\.?[a-z0-9_]+/)+[a-z0-9_]*`' "$file" |
		tr -d '`' | grep -vE '^(text|application)/' | sort -u) # not MIME types
	# Test functions and package-qualified names in code spans.
	while read -r tok; do
		checked=$((checked + 1))
		resolve_name "$file" "$tok"
	done < <(grep -oE '`[^`]+`' "$file" | tr -d '`' |
		grep -oE '^(Test|Benchmark|Fuzz|Example)[A-Za-z0-9_]*$|^(segment|snowflake|store|api|client|migrations|atomicfile|zkworker|sqllease|dsn|storetest|sqlstore|servertest|dbtest|zktest|dbproc|clocktest)\.[A-Z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)?$' | sort -u)
}

if [[ ${1:-} == --loose ]]; then
	shift
	for f in "$@"; do loose "$f"; done
else
	for f in "${@:-docs/architecture.md}"; do strict "$f"; done
fi
if [[ ${#unchecked[@]} -gt 0 ]]; then
	echo "not checked (commands, or code text outside any file's context):"
	printf '  %s\n' "${unchecked[@]}"
fi
echo "checkrefs: $checked names checked, $fail not found, ${#unchecked[@]} not checked"
((fail == 0))
