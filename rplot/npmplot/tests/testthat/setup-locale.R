# Result files are UTF-8 (descriptions, bookmarks): as in the programs, a UTF-8 character
# type even when the tests are started in the C locale.
npm_use_utf8()
