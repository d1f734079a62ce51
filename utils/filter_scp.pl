#!/usr/bin/env perl
# Kaldi's utils/filter_scp.pl.
#
# Usage: utils/filter_scp.pl [--exclude] [-f <field>] <id-list> [<in.scp>...] > out.scp
#
# Prints the input lines (from the files given, or stdin) whose <field>-th field (1-based,
# default 1) is one of the ids in <id-list> (the first field of each of its lines). With
# --exclude, prints the lines whose field is NOT in the list. Order and content of the input
# lines are kept. A negative field counts from the end of the line (-1: the last field).
use strict;
use warnings;

my $exclude = 0;
my $field = 1;
while (@ARGV) {
  if ($ARGV[0] eq '--exclude') { $exclude = 1; shift @ARGV; }
  elsif ($ARGV[0] eq '-f') {
    shift @ARGV;
    $field = shift @ARGV;
    defined $field && $field =~ /^-?[1-9]\d*$/ or die "filter_scp.pl: -f needs a non-zero integer field index\n";
  }
  elsif ($ARGV[0] eq '-h' || $ARGV[0] eq '--help') {
    print "Usage: utils/filter_scp.pl [--exclude] [-f <field>] <id-list> [<in.scp>] > out.scp\n";
    exit 0;
  }
  else { last; }
}
@ARGV >= 1 or die "Usage: utils/filter_scp.pl [--exclude] [-f <field>] <id-list> [<in.scp>] > out.scp\n";

my $idlist = shift @ARGV;
open(my $ids, '<', $idlist) or die "filter_scp.pl: cannot open id list $idlist: $!\n";
my %seen;
while (my $line = <$ids>) {
  my @a = split(' ', $line);
  next unless @a;
  $seen{$a[0]} = 1;
}
close $ids;

while (my $line = <>) {
  my @a = split(' ', $line);
  if (!@a) { next; }
  my $idx = $field > 0 ? $field - 1 : scalar(@a) + $field;
  ($idx >= 0 && $idx < @a) or die "filter_scp.pl: $ARGV:$.: line has no field $field: $line";
  my $in = exists $seen{$a[$idx]};
  print $line if ($in xor $exclude);
} continue {
  close ARGV if eof;
}
