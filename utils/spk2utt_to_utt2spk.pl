#!/usr/bin/env perl
# Kaldi's utils/spk2utt_to_utt2spk.pl: reads "spk utt1 utt2 ..." lines (spk2utt) from the files
# given or stdin and writes one "utt spk" line (utt2spk) per utterance, in input order.
use strict;
use warnings;

if (@ARGV && ($ARGV[0] eq '-h' || $ARGV[0] eq '--help')) {
  print "Usage: utils/spk2utt_to_utt2spk.pl [spk2utt] > utt2spk\n";
  exit 0;
}
while (my $line = <>) {
  next if $line =~ /^\s*$/;
  my ($spk, @utts) = split(' ', $line);
  @utts or die "spk2utt_to_utt2spk.pl: $ARGV:$.: speaker '$spk' has no utterances\n";
  print "$_ $spk\n" for @utts;
} continue {
  close ARGV if eof;
}
