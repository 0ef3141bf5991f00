/**
 * llama.cpp's grammar parser writes out a repetition `x{m,n}` as rules, and refuses a grammar
 * where that comes to more than 2000 (MAX_REPETITION_THRESHOLD in llama-grammar.cpp); a string
 * character counts twice there. Lengths, item and property counts and a pattern's repetition
 * counts stay within what it parses.
 */
export const GRAMMAR_REPETITION_LIMIT = 1000;
