#!/usr/bin/env perl
# Kaldi's utils/utt2spk_to_spk2utt.pl: reads "utt spk" lines (utt2spk) from the files given or
# stdin and writes "spk utt1 utt2 ..." lines (spk2utt) to stdout. Speakers and their utterances
# keep the order of first appearance, so a C-sorted utt2spk whose speaker ids are prefixes of the
# utterance ids gives a C-sorted spk2utt.
use strict;
use warnings;

if (@ARGV && ($ARGV[0] eq '-h' || $ARGV[0] eq '--help')) {
  print "Usage: utils/utt2spk_to_spk2utt.pl [utt2spk] > spk2utt\n";
  exit 0;
}
my (@spks, %utts);
while (my $line = <>) {
  next if $line =~ /^\s*$/;
  my @a = split(' ', $line);
  @a == 2 or die "utt2spk_to_spk2utt.pl: $ARGV:$.: expected 'utt spk', got: $line";
  my ($utt, $spk) = @a;
  push @spks, $spk unless exists $utts{$spk};
  push @{$utts{$spk}}, $utt;
} continue {
  close ARGV if eof;   # per-file line numbers
}
print "$_ @{$utts{$_}}\n" for @spks;
