# plot.gp - render the cache workload's resident bytes over time
#
#   build/bench/vrbench --plot-data doc/cache-workload.dat [--only cache]
#   gnuplot bench/plot.gp                     (from the source root)
#   gnuplot -e "data='x.dat'; out='x.svg'; zoom='x-zoom.svg'" bench/plot.gp
#   (names ending in .png use pngcairo)
#
# The data file holds one gnuplot block per style (index 0..3: vr-explicit,
# vr-lazy, heap-lru, canary; columns op, seconds, resident MiB, event),
# then the CRITICAL pressure events as vertical segments (index 4) and the
# budget as a horizontal segment (index 5); index 6..9 repeat the series
# cut to a window around the first pressure event and index 10 the budget
# over it, for the second picture (which shows how each style refills).
#
# Two pictures rather than one multiplot: gnuplot 5.4 drew stray segments
# in the second panel of a multiplot here, so each picture is one plain
# plot.  Reading aids: the key sits below the plot, never on the data; the
# two libvrange styles differ in width, colour and markers; the budget is
# drawn after the series, so it shows where the libvrange lines run on it;
# the CRITICAL events are drawn last, in front of the drops they cause,
# and named at the top.

if (!exists("data")) data = 'doc/cache-workload.dat'
if (!exists("out")) out = 'doc/cache-workload.svg'
if (!exists("zoom")) zoom = 'doc/plot-cache-zoom.svg'

stats data index 5 using 1 nooutput
nops = STATS_max
stats data index 6 using 1 nooutput
zlo = STATS_min
zhi = STATS_max

set key outside below center horizontal maxrows 2 box width 1 samplen 3
set grid ytics lc rgb '#dddddd'
# one look per style, the same in both pictures.  No dash patterns: with
# them gnuplot 5.4 draws stray segments from the series to the key here.
# The libvrange styles run on the budget line: explicit is a wide blue
# band, lazy a thin red line inside it, the budget a thin black line
# drawn over both.
explicit = "lw 6 lc rgb '#7fb2e5'"
lazy = "lw 1.5 lc rgb '#d62728'"
heap = "lw 2 lc rgb '#ff9f40'"
canary = "lw 2 lc rgb '#6cbf6c'"
budget = "lw 1.5 lc rgb '#000000'"
set yrange [0:*]
set ylabel "resident MiB (above the start of the run)"

# ---- the whole run ----
if (out[strlen(out)-2:] eq 'ng') {
	set terminal pngcairo size 1000,500 enhanced font 'sans,10' background rgb 'white'
} else {
	set terminal svg size 1000,500 dynamic enhanced font 'sans,12' background rgb 'white'
}
set output out
set title "Cache workload: resident memory over time\n(Zipf 0.9 over objects of 4 KiB-1 MiB, CRITICAL pressure every 20% of the ops)"
set xlabel "operation" offset 0,0.6
set xrange [0:nops]
plot data index 3 using 1:3 with lines @canary title 'madvfree-canary (no budget)', \
     data index 2 using 1:3 with lines @heap title 'heap-lru (malloc/free)', \
     data index 0 using 1:3 with lines @explicit title 'libvrange unmark/access/mark', \
     data index 1 using 1:3 with lines @lazy title 'libvrange lazy fault', \
     data index 5 using 1:2 with lines @budget title 'budget (limit)', \
     data index 4 using 1:2 with impulses lw 1.5 lc rgb '#555555' title 'CRITICAL pressure', \
     data index 4 using 1:($2 > 0 ? $2 : 1/0):("CRITICAL") with labels offset 0,0.7 font ',9' tc rgb '#555555' notitle
unset output

# ---- zoom on the first pressure event ----
if (zoom[strlen(zoom)-2:] eq 'ng') {
	set terminal pngcairo size 1000,500 enhanced font 'sans,10' background rgb 'white'
} else {
	set terminal svg size 1000,500 dynamic enhanced font 'sans,12' background rgb 'white'
}
set output zoom
set title "Cache workload: the first CRITICAL pressure event, and how each style refills after it"
set xlabel "operation" offset 0,0.6
set xrange [zlo:zhi]
plot data index 9 using 1:3 with lines @canary title 'madvfree-canary (no budget)', \
     data index 8 using 1:3 with lines @heap title 'heap-lru (malloc/free)', \
     data index 6 using 1:3 with lines @explicit title 'libvrange unmark/access/mark', \
     data index 7 using 1:3 with lines @lazy title 'libvrange lazy fault', \
     data index 10 using 1:2 with lines @budget title 'budget (limit)'
unset output
