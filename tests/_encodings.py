"""Short texts in twelve languages, and the files they make in each legacy encoding that can hold them: the test
set that measures text-encoding detection (``citeline.sources.encoding``; tests/unit/test_encoding_accuracy.py,
``python bench/ingest.py encodings``).

The sentences are written for this set (one to three sentences each, some only a few words: the short files
where a guess is hardest). Each text is encoded only in the encodings that can represent it: a French text with
``’`` or ``œ`` in Windows-1252 but not Latin-1, a Czech one in Windows-1250 but not 1252, a Russian one in
Windows-1251; every text also in UTF-8 and in UTF-16 with its byte-order mark (as real UTF-16 files carry it).
A sample is decoded right when the decoded text equals the sentence (not when the codec's name matches:
Windows-1252 and Latin-1 decode most texts alike).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

#: The encodings measured: the legacy code pages of Western, Central European and Cyrillic text, and the two
#: Unicode forms (UTF-16 written with its byte-order mark, as Windows' editors write it).
ENCODINGS = ("cp1252", "latin-1", "cp1250", "cp1251", "utf-16", "utf-8")

TEXTS: dict[str, list[str]] = {
    "English": [
        "The café on the corner serves a decent crème brûlée.",
        "She wrote a naïve résumé and sent it anyway.",
        "“Don’t touch that,” he said — too late.",
        "The rent rose to €1,200 a month.",
        "Naïve façade.",
        "It’s fine.",
        "We met at the Häagen-Dazs stand by the pier.",
        "The fiancée’s cousin plays the cello – badly.",
        "Tickets cost £15; children go free.",
        "His coöperation was never in doubt.",
        "A smörgåsbord of old maps covered the table.",
        "“Why not?” she asked.",
        "The doctor’s piñata broke on the first hit.",
        "Temperatures fell to -5° overnight, then rose to 3°.",
        "Déjà vu, again.",
        "He ordered a jalapeño bagel and two lattes.",
        "The report’s appendix runs to 40 pages…",
        "Over the weekend the river flooded the lower fields, and the bridge was closed until Tuesday.",
    ],
    "French": [
        "Le garçon a mangé une crêpe au citron.",
        "Naïve façade.",
        "Où est la bibliothèque, s’il vous plaît ?",
        "Ça coûte cher, mais ça vaut le coup.",
        "Les élèves révisent leurs leçons après le dîner.",
        "Il a reçu une lettre de sa sœur hier soir.",
        "L’hôpital se trouve à deux rues d’ici.",
        "Noël approche ; les vitrines sont déjà décorées.",
        "Je préfère le thé à la menthe.",
        "Un cœur d’artichaut, ça ne se mange pas cru.",
        "Elle a oublié son parapluie à la gare.",
        "Été comme hiver, il nage dans le lac.",
        "Le maïs pousse mal cette année à cause de la sécheresse.",
        "C’était une idée géniale !",
        "Hôtel fermé.",
        "Nous irons à Genève en février, si tout va bien.",
        "Le vieux château domine la vallée depuis le XIIe siècle.",
        "Quelle drôle d’idée !",
    ],
    "Spanish": [
        "El niño juega en el jardín.",
        "El niño.",
        "¿Dónde está la estación de tren?",
        "Mañana iremos a la montaña con mis primos.",
        "La canción fue un éxito en todo el país.",
        "¡Qué sorpresa verte aquí!",
        "Compré pan, queso y aceitunas en el mercado.",
        "El camión se detuvo frente a la farmacia.",
        "Mi abuela cocina la mejor paella de la región.",
        "Año nuevo, vida nueva.",
        "Los pingüinos viven en el hemisferio sur.",
        "La reunión empezará a las ocho en punto.",
        "¿Por qué no me llamaste ayer?",
        "Él dijo que volvería pronto, pero nunca regresó.",
        "Perdí las llaves del coche otra vez.",
        "El señor Muñoz vive en el tercer piso.",
        "La lección de hoy trata de la fotosíntesis.",
        "Está lloviendo.",
    ],
    "German": [
        "Die Straße ist nach dem Regen nass.",
        "Grüße aus München!",
        "Wir fahren nächste Woche an den Bodensee.",
        "Der Bäcker öffnet um sechs Uhr früh.",
        "Über den Wolken scheint immer die Sonne.",
        "Ich hätte gern zwei Brötchen und einen Kaffee.",
        "Das Mädchen spielt Geige im Schulorchester.",
        "Können Sie mir bitte helfen?",
        "Schöne Grüße.",
        "Die Prüfung war schwieriger als erwartet.",
        "Im Frühling blühen die Obstbäume im Garten.",
        "Er hat seinen Schlüssel im Büro vergessen.",
        "Der Zug hatte zwanzig Minuten Verspätung.",
        "Wir müssen die Heizung reparieren lassen.",
        "Fußball ist hier fast eine Religion.",
        "„Wo bist du?“, rief sie über den Hof.",
        "Die Größe der Jacke passt nicht.",
        "Äpfel, Birnen und Pflaumen liegen auf dem Tisch.",
    ],
    "Portuguese": [
        "O coração da cidade bate na praça principal.",
        "Não sei se ele vem amanhã.",
        "As crianças brincam no jardim até à noite.",
        "Obrigado pela atenção.",
        "O avião aterrou em São Paulo às dez horas.",
        "Comemos pão com manteiga ao pequeno-almoço.",
        "A lição de hoje é sobre a revolução industrial.",
        "Você já experimentou açaí?",
        "Ele está à espera do autocarro há meia hora.",
        "A informação está disponível no site da câmara.",
        "Vou à praia no próximo sábado.",
        "As mãos dela estavam frias.",
        "Acho que é uma ótima ideia.",
        "O irmão mais velho trabalha numa fábrica de calçado.",
        "Há muito tempo que não chove.",
        "Ação!",
        "Os médicos recomendam beber água com frequência.",
        "A canção terminou e o público aplaudiu de pé.",
    ],
    "Italian": [
        "Perché non vieni con noi al mare?",
        "La città è bellissima di sera.",
        "Ho già mangiato, grazie.",
        "Il caffè è pronto.",
        "Lunedì andrò dal dentista.",
        "Più tardi ti chiamo, va bene?",
        "La libertà è un bene prezioso.",
        "Questa è la verità, te lo giuro.",
        "L’università chiude per le vacanze di Natale.",
        "Non c’è più latte nel frigorifero.",
        "Così è la vita.",
        "Il treno per Firenze partirà in ritardo.",
        "Venerdì sera c’è una festa a casa di Luca.",
        "Può ripetere, per favore?",
        "La qualità del servizio è migliorata molto.",
        "Andiamo in montagna perché fa troppo caldo in città.",
        "Ciao, come stai?",
        "Ho comprato un paio di scarpe nuove al mercato di via Roma.",
    ],
    "Polish": [
        "Zażółć gęślą jaźń.",
        "Dzień dobry, jak się masz?",
        "Koń i pies śpią w stajni.",
        "Jutro idziemy do kina na nowy film.",
        "Ślimak powoli przechodził przez ścieżkę.",
        "Mój brat mieszka w Łodzi od pięciu lat.",
        "Proszę zamknąć drzwi.",
        "Wczoraj padał deszcz przez cały dzień.",
        "Żółw jest starszy niż ten dąb.",
        "Chciałbym zamówić kawę z mlekiem.",
        "Dziękuję bardzo!",
        "Gdzie jest najbliższy przystanek autobusowy?",
        "Ta książka leży na półce od miesiąca.",
        "Zimą jeziora zamarzają, a dzieci jeżdżą na łyżwach.",
        "Nie mam czasu.",
        "Pociąg do Krakowa odjeżdża za dziesięć minut.",
        "Ćwiczenia zaczynają się o ósmej.",
        "Źródło tej rzeki leży w górach.",
    ],
    "Czech": [
        "Příliš žluťoučký kůň úpěl ďábelské ódy.",
        "Dobrý den, jak se máte?",
        "Zítra pojedeme vlakem do Brna.",
        "Děkuji za pomoc.",
        "Na zahradě roste jabloň a hrušeň.",
        "Můj dědeček byl učitel.",
        "Kde je nejbližší lékárna?",
        "V létě jezdíme k moři.",
        "Čaj, nebo kávu?",
        "Knihovna je zavřená kvůli rekonstrukci.",
        "Řeka se v noci vylila z břehů.",
        "Potřebuji koupit chléb a mléko.",
        "Ten film byl opravdu skvělý.",
        "Šel jsem pěšky, protože autobus nejel.",
        "Sněží.",
        "Naše kočka spí celý den na gauči.",
        "Večer půjdeme do divadla.",
        "Ještě jsem nedočetl tu knihu.",
    ],
    "Hungarian": [
        "Árvíztűrő tükörfúrógép.",
        "Jó reggelt kívánok!",
        "A macska az ablakpárkányon alszik.",
        "Holnap esni fog az eső.",
        "Köszönöm szépen a segítséget.",
        "Hol van a legközelebbi gyógyszertár?",
        "A gyerekek a kertben játszanak.",
        "Ő a legjobb barátom.",
        "Szeretnék egy kávét tejjel.",
        "A vonat tíz percet késik.",
        "Tegnap sokáig dolgoztam az irodában.",
        "Nyáron a Balatonnál nyaralunk.",
        "Ez a könyv nagyon érdekes.",
        "Kérem, üljön le.",
        "Őszintén szólva nem értem.",
        "A piacon friss gyümölcsöt és zöldséget vettünk.",
        "Fázom.",
        "Több mint húsz éve élünk ebben a házban.",
    ],
    "Russian": [
        "Съешь же ещё этих мягких французских булок, да выпей чаю.",
        "Привет, как дела?",
        "Завтра мы поедем на дачу.",
        "Спасибо за помощь.",
        "Где находится ближайшая аптека?",
        "Кошка спит на подоконнике весь день.",
        "Мой брат работает инженером в Москве.",
        "Сегодня идёт снег.",
        "Я люблю читать книги по вечерам.",
        "Поезд опаздывает на двадцать минут.",
        "Дом.",
        "Мы купили хлеб, молоко и сыр.",
        "Эта река замерзает каждую зиму.",
        "Извините, вы не подскажете, который час?",
        "Дети играют во дворе после школы.",
        "Он обещал позвонить, но так и не позвонил.",
        "В библиотеке очень тихо.",
        "Летом мы часто ходим в лес за грибами.",
    ],
    "Ukrainian": [
        "Добрий день, як справи?",
        "Їжачок ховається під листям.",
        "Завтра ми їдемо до Львова.",
        "Дякую за допомогу.",
        "Де знаходиться найближча аптека?",
        "Моя сестра вчиться в університеті.",
        "Сьогодні йде дощ.",
        "Я п’ю чай з медом.",
        "Ґанок біля хати треба полагодити.",
        "Діти граються на подвір’ї.",
        "Це моя улюблена пісня.",
        "Київ — столиця України.",
        "Восени листя жовтіє і падає.",
        "Ми купили свіжий хліб на ринку.",
        "Привіт!",
        "Наш кіт любить спати на дивані.",
        "Потяг відправляється о дев’ятій.",
        "Вчора ввечері ми дивилися фільм.",
    ],
    "Bulgarian": [
        "Добро утро, как сте?",
        "Утре ще ходим на планина.",
        "Благодаря за помощта.",
        "Къде е най-близката аптека?",
        "Котката спи на дивана цял ден.",
        "Брат ми работи в София.",
        "Днес вали сняг.",
        "Обичам да чета книги вечер.",
        "Влакът закъснява с двадесет минути.",
        "Купихме хляб, мляко и сирене.",
        "Това е много интересна книга.",
        "Децата играят в двора след училище.",
        "Искам чаша кафе, моля.",
        "Морето беше топло и спокойно.",
        "Здравей!",
        "Той обеща да се обади, но не се обади.",
        "Всяка сутрин пием кафе на терасата.",
        "Градината е пълна с цветя през юни.",
    ],
}


@dataclass(frozen=True)
class Sample:
    """One text of the set as a file's bytes in one encoding."""

    language: str
    encoding: str
    text: str
    data: bytes


def fits(text: str, encoding: str) -> bool:
    """True when ``encoding`` can represent every character of ``text``."""
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return False
    return True


def samples(encodings: tuple[str, ...] = ENCODINGS) -> Iterator[Sample]:
    """Every text in every one of ``encodings`` that can represent it (UTF-16 with its byte-order mark)."""
    for language, texts in TEXTS.items():
        for text in texts:
            for encoding in encodings:
                if fits(text, encoding):
                    yield Sample(language, encoding, text, text.encode(encoding))


def text_count() -> int:
    """How many texts the set holds."""
    return sum(len(texts) for texts in TEXTS.values())
