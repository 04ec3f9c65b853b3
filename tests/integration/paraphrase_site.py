"""A loopback site of pages on distinct topics, and questions that paraphrase them (not their words).

Shared by the retrieval tests (recall@1/@3 asserted) and infra/bench/retrieval.py (recall reported).
"""

from __future__ import annotations

from gleaner.demosite.testsite import Page

# path -> (title, two paragraphs); QUESTIONS below paraphrase each page without its key words.
TOPICS: dict[str, tuple[str, str, str]] = {
    "/sourdough": ("Baking sourdough bread",
                   "Sourdough rises with a starter of wild yeast and lactobacilli that the baker feeds with flour "
                   "and water every day. The long fermentation gives the crumb its open holes and tangy taste.",
                   "Shape the dough, proof it overnight in the fridge, then bake it in a hot covered pot."),
    "/beekeeping": ("Beekeeping for beginners",
                    "A hive holds one queen, thousands of workers and a few drones. Beekeepers inspect the frames "
                    "for brood, check for mites and harvest honey in late summer.",
                    "Wear a veil and use a smoker to keep the colony calm while you work."),
    "/tides": ("Why tides happen",
               "The moon's gravity pulls the oceans into two bulges, one facing the moon and one opposite. "
               "As the earth turns, each coast passes through both bulges: two high waters every day.",
               "Spring tides come when sun and moon line up; neap tides when they pull at right angles."),
    "/composting": ("Home composting",
                    "Compost turns vegetable peelings, coffee grounds and grass cuttings into dark, crumbly humus. "
                    "Mix green and brown material, keep the heap moist and turn it so microbes get air.",
                    "After a few months the finished compost feeds the soil of your flower beds."),
    "/chess": ("Chess openings",
               "The opening is the first phase of a chess game. Control the centre with pawns, develop knights "
               "and bishops early and castle to protect the king.",
               "Popular openings include the Sicilian Defence, the Ruy Lopez and the Queen's Gambit."),
    "/volcanoes": ("How volcanoes erupt",
                   "Magma rises from the mantle and collects in a chamber below the crater. When gas pressure "
                   "builds, the volcano erupts lava, ash and pumice.",
                   "Shield volcanoes pour runny lava; stratovolcanoes explode violently."),
    "/marathon": ("Training for a marathon",
                  "A marathon is 42.195 kilometres. Build weekly mileage slowly over sixteen weeks, include one long "
                  "run each weekend and taper before race day.",
                  "Practise drinking and eating energy gels during long runs so your stomach copes."),
    "/photosynthesis": ("Photosynthesis",
                        "Chlorophyll in leaves captures light energy and uses it to combine carbon dioxide and water "
                        "into glucose, releasing oxygen as a by-product.",
                        "The process happens in chloroplasts and powers almost every food chain."),
    "/taxes": ("Filing your income tax return",
               "Each year you report your wages, interest and other income to the revenue office, claim the "
               "deductions you are entitled to and pay any tax still owed by the deadline.",
               "Keep payslips and receipts: an audit can ask for them years later."),
    "/vaccines": ("How vaccines work",
                  "A vaccine shows the immune system a harmless piece or weakened form of a pathogen. The body makes "
                  "antibodies and memory cells, so a later infection is fought off quickly.",
                  "Boosters refresh that memory when protection wanes."),
    "/knitting": ("Learning to knit",
                  "Knitting makes fabric from yarn with two needles. Cast on a row of stitches, then alternate knit "
                  "and purl stitches to build up the garment row by row.",
                  "A plain scarf in chunky wool is a good first project."),
    "/solar": ("Solar panels at home",
               "Photovoltaic panels on a south-facing roof convert daylight into direct current; an inverter turns "
               "it into the alternating current your appliances use.",
               "Surplus power can charge a battery or be sold back to the grid."),
    "/coffee": ("Brewing espresso",
                "Espresso forces hot water through finely ground, tightly tamped coffee at about nine bars of "
                "pressure. A good shot takes twenty-five seconds and has a golden crema.",
                "Adjust the grind if the shot runs too fast or too slow."),
    "/black-holes": ("Black holes",
                     "A black hole forms when a massive star collapses. Its gravity is so strong that within the "
                     "event horizon nothing, not even light, can get out.",
                     "Astronomers detect them by the hot gas swirling around them and by gravitational waves."),
    "/passwords": ("Choosing strong passwords",
                   "Use a long, unique passphrase for every account and keep them in a password manager. Turn on "
                   "two-factor authentication so a stolen password alone cannot unlock your email.",
                   "Never reuse the password of your bank anywhere else."),
    "/wine": ("Wine tasting",
              "Look at the colour, swirl the glass, smell the bouquet, then sip and let the wine coat your palate. "
              "Note the acidity, tannins, sweetness and the length of the finish.",
              "Tasting from light whites to heavy reds keeps your senses fresh."),
    "/dogs": ("Training a puppy",
              "Reward good behaviour immediately with a treat and praise. Teach sit, stay and recall in short daily "
              "sessions, and never punish a dog that comes back to you.",
              "Crate training helps with house-breaking."),
    "/earthquakes": ("Earthquakes",
                     "The earth's crust is broken into tectonic plates. Where they grind past each other stress "
                     "builds up until a fault slips, sending seismic waves through the rock.",
                     "Seismometers record the waves and the magnitude scale measures the energy released."),
    "/jazz": ("A short history of jazz",
              "Jazz grew in New Orleans around 1900 from blues, ragtime and brass band music. Musicians like Louis "
              "Armstrong made the improvised solo the heart of the style.",
              "Swing, bebop and cool jazz followed in the decades after."),
    "/bicycle": ("Fixing a puncture",
                 "Take the wheel off, lever the tyre from the rim and pull out the inner tube. Find the hole, roughen "
                 "the rubber, glue on a patch and pump the tube back up.",
                 "Check the inside of the tyre for the thorn or glass that caused it."),
    "/sleep": ("Sleeping better",
               "Go to bed and get up at the same times every day, keep the bedroom dark and cool, and avoid caffeine "
               "and screens in the evening.",
               "A short wind-down routine tells your body that rest is coming."),
    "/plastics": ("Recycling plastic",
                  "Rinse bottles and food trays before putting them in the collection bin. At the sorting plant they "
                  "are separated by polymer, shredded, washed and melted into pellets.",
                  "The pellets become new packaging, fleece jackets or garden furniture."),
}

QUESTIONS: dict[str, str] = {
    "how do I make a loaf leavened by a fermented culture instead of packet yeast": "/sourdough",
    "looking after colonies of insects that make a sweet golden syrup": "/beekeeping",
    "why does the sea at the shore rise and fall twice a day": "/tides",
    "turning kitchen waste and garden clippings into fertiliser": "/composting",
    "good first moves in a board game with rooks and a checkmate": "/chess",
    "mountains that spew molten rock and ash": "/volcanoes",
    "getting my body ready to run forty-two kilometres": "/marathon",
    "how plants turn sunlight into sugar": "/photosynthesis",
    "sending the government a yearly statement of what I earned": "/taxes",
    "injections that train the body's defences against disease": "/vaccines",
    "making a wool scarf by hand with two long sticks": "/knitting",
    "generating electricity from sunshine on my house": "/solar",
    "preparing a strong little cup from roasted beans with a machine": "/coffee",
    "regions of space where gravity traps everything": "/black-holes",
    "keeping my online accounts safe from hackers": "/passwords",
    "judging the aroma and flavour of fermented grape drinks": "/wine",
    "teaching a young dog to obey commands": "/dogs",
    "why the ground shakes when rocks deep underground shift": "/earthquakes",
    "origins of improvised music from Louisiana": "/jazz",
    "repairing a flat tyre on my bike": "/bicycle",
    "habits that help me fall asleep and rest well at night": "/sleep",
    "what happens to bottles after they go in the recycling bin": "/plastics",
}


def topic_html(title: str, first: str, second: str) -> str:
    return (f"<html><head><title>{title}</title></head><body><main><article><h1>{title}</h1>"
            f"<p>{first}</p><p>{second}</p></article></main></body></html>")


def topic_pages(topics: dict[str, tuple[str, str, str]] | None = None) -> dict[str, Page]:
    """The site's pages: a home page linking every topic page."""
    topics = TOPICS if topics is None else topics
    links = "".join(f'<li><a href="{path}">{title}</a></li>' for path, (title, _a, _b) in topics.items())
    pages = {"/": Page(f"<html><head><title>Topics</title></head><body><ul>{links}</ul></body></html>")}
    pages.update({path: Page(topic_html(*page)) for path, page in topics.items()})
    return pages


def recall(ranked: dict[str, list[str]], base_url: str) -> dict[str, float]:
    """recall@1 and @3 of {question: [result urls, best first]} against QUESTIONS' pages."""
    at1 = sum(1 for q, urls in ranked.items() if urls[:1] == [base_url + QUESTIONS[q]])
    at3 = sum(1 for q, urls in ranked.items() if base_url + QUESTIONS[q] in urls[:3])
    return {"recall@1": at1 / len(ranked), "recall@3": at3 / len(ranked), "questions": len(ranked)}
