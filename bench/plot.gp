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
# in the second panel of a multiplot here (and with dashed lines or an
# opaque key), so each picture is one plain plot with solid lines.

if (!exists("data")) data = 'doc/cache-workload.dat'
if (!exists("out")) out = 'doc/cache-workload.svg'
if (!exists("zoom")) zoom = 'doc/plot-cache-zoom.svg'

stats data index 5 using 1 nooutput
nops = STATS_max
stats data index 6 using 1 nooutput
zlo = STATS_min
zhi = STATS_max

set key top left box
set grid ytics lc rgb '#dddddd'
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
set xlabel "operation"
set xrange [0:nops]
plot data index 4 using 1:2 with impulses lw 1 lc rgb '#999999' title 'CRITICAL pressure', \
     data index 3 using 1:3 with lines lw 2 lc rgb '#2ca02c' title 'madvfree-canary (no budget)', \
     data index 2 using 1:3 with lines lw 2 lc rgb '#ff7f0e' title 'heap-lru (malloc/free)', \
     data index 0 using 1:3 with lines lw 4 lc rgb '#1f77b4' title 'libvrange unmark/access/mark', \
     data index 1 using 1:3 with lines lw 1.5 lc rgb '#17becf' title 'libvrange lazy fault', \
     data index 5 using 1:2 with lines lw 1 lc rgb '#aa0000' title 'budget (limit)'
unset output

# ---- zoom on the first pressure event ----
if (zoom[strlen(zoom)-2:] eq 'ng') {
	set terminal pngcairo size 1000,500 enhanced font 'sans,10' background rgb 'white'
} else {
	set terminal svg size 1000,500 dynamic enhanced font 'sans,12' background rgb 'white'
}
set output zoom
set title "Cache workload: the first CRITICAL pressure event, and how each style refills after it"
set xlabel "operation"
set xrange [zlo:zhi]
plot data index 9 using 1:3 with linespoints pt 7 ps 0.4 lw 2 lc rgb '#2ca02c' title 'madvfree-canary (no budget)', \
     data index 8 using 1:3 with linespoints pt 7 ps 0.4 lw 2 lc rgb '#ff7f0e' title 'heap-lru (malloc/free)', \
     data index 6 using 1:3 with linespoints pt 7 ps 0.4 lw 4 lc rgb '#1f77b4' title 'libvrange unmark/access/mark', \
     data index 7 using 1:3 with linespoints pt 7 ps 0.4 lw 1.5 lc rgb '#17becf' title 'libvrange lazy fault', \
     data index 10 using 1:2 with lines lw 1 lc rgb '#aa0000' title 'budget (limit)'
unset output
